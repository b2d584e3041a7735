-- wrk script: POSTs one fixed body on every request and prints one JSON line of results.
--
--   wrk -s bench/load/post.lua URL -- BODY_FILE CONTENT_TYPE [ACCEPT|-] [codes]
--
-- The body is read once per thread, so every request of a run is byte-identical. wrk counts
-- answers with a status > 399 by itself (summary.errors.status) at no cost; "codes" also counts
-- each status code in response(), which makes wrk hand every answer's headers and body to Lua,
-- so it is off unless asked for (it slows the client on big answers).

local threads = {}

function setup(thread)
   table.insert(threads, thread)
end

function init(args)
   local f = assert(io.open(args[1], "rb"))
   wrk.method = "POST"
   wrk.body = f:read("*a")
   f:close()
   wrk.headers["Content-Type"] = args[2]
   if args[3] and args[3] ~= "-" then
      wrk.headers["Accept"] = args[3]
   end
   if args[4] == "codes" then
      codes = {}
      -- defined here, not at the top: wrk only buffers answers when response exists after init
      response = function(status)
         local k = tostring(status)
         codes[k] = (codes[k] or 0) + 1
      end
   end
end

function done(summary, latency, requests)
   local merged = {}
   for _, t in ipairs(threads) do
      for k, n in pairs(t:get("codes") or {}) do
         merged[k] = (merged[k] or 0) + n
      end
   end
   local codes = {}
   for k, n in pairs(merged) do
      codes[#codes + 1] = string.format('"%s": %d', k, n)
   end
   local e = summary.errors
   -- latency values are microseconds
   io.write(string.format(
      'LOAD {"requests": %d, "duration_us": %d, "bytes": %d, "status_errors": %d, ' ..
      '"connect": %d, "read": %d, "write": %d, "timeout": %d, ' ..
      '"mean_us": %.1f, "p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d, "codes": {%s}}\n',
      summary.requests, summary.duration, summary.bytes, e.status,
      e.connect, e.read, e.write, e.timeout,
      latency.mean, latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency.max, table.concat(codes, ", ")))
end
