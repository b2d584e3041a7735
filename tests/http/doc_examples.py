"""The examples of README.md and docs/*.md as tests: each ```sh block runs as one bash script
against a test daemon (its lines that talk to localhost:8080, in order, so a block may set a
variable from one answer and use it in the next line), each ```python block that talks to
localhost:8080 as one Python program. curl gets -sS -f, so an HTTP error fails the block, unless
the line ends in `# NNN`: then that status is what it must answer."""

import re

FENCE = re.compile(r"^```\s*([a-z]*)\s*$")
LOCAL = re.compile(r"(https?://)?(localhost|127\.0\.0\.1|0\.0\.0\.0):8080")
README_SOCKET = "/run/crunchd/crunchd.sock"
EXPECT = re.compile(r"^(.*?)\s+#\s*(\d{3})\s*$")


def blocks(text):
    """(language, first line number, lines) of each fenced block."""
    out, lang, start, body = [], None, 0, []
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line.strip())
        if lang is None and m:
            lang, start, body = m.group(1), n, []
        elif lang is not None and line.strip().startswith("```"):
            out.append((lang, start, body))
            lang = None
        elif lang is not None:
            body.append(line)
    return out


def join_continued(lines):
    out, pending = [], None
    for line in lines:
        s = line.rstrip()
        if pending is not None:
            pending += " " + s.rstrip("\\").strip()
            if not s.endswith("\\"):
                out.append(pending)
                pending = None
        elif s.endswith("\\"):
            pending = s.rstrip("\\").strip()
        else:
            out.append(s)
    return out


def talks_to_daemon(line):
    return bool(LOCAL.search(line) or README_SOCKET in line)


def localize(text, port, sock=None):
    text = LOCAL.sub(lambda m: f"{m.group(1) or ''}127.0.0.1:{port}", text)
    return text.replace(README_SOCKET, sock) if sock else text


def shell_line(line):
    """A documented command as the test runs it: every curl fails on an HTTP error, or must answer
    the status its trailing `# NNN` names."""
    m = EXPECT.match(line)
    if m and "curl " in m.group(1):
        cmd = re.sub(r"^curl ", "curl -sS --max-time 60 -o /dev/null -w '%{http_code}' ", m.group(1).strip())
        return f'test "$({cmd})" = {m.group(2)}'
    return re.sub(r"(^|\$\(|\|\s*)curl ", lambda k: f"{k.group(1)}curl -sS -f --max-time 60 ", line.strip())


def sh_script(lines, port, sock=None):
    """The daemon lines of a sh block as one script (None when it has none)."""
    cmds = [c for c in join_continued(lines) if c.strip() and not c.lstrip().startswith("#") and talks_to_daemon(c)]
    if not cmds:
        return None
    return "set -euo pipefail\n" + "\n".join(shell_line(localize(c, port, sock)) for c in cmds) + "\n"


def examples(path):
    """[(id, lang, source)] of the runnable blocks of a Markdown file."""
    out = []
    for lang, start, body in blocks(path.read_text()):
        text = "\n".join(body)
        if lang in ("sh", "bash", "shell") and any(talks_to_daemon(l) for l in body):
            out.append((f"{path.name}:{start}", "sh", body))
        elif lang == "python" and talks_to_daemon(text):
            out.append((f"{path.name}:{start}", "python", body))
    return out
