"""The page at GET / in a real browser (issue 39): headless Chromium, driven by selenium, loads it
from a daemon that needs a bearer token, is given the token in its field, runs a comparison on
generated operands, and the chart's bars must be the JSON answer's kernels with its times, rates
and errors; the browser logs no error (a Content-Security-Policy violation would be one). A
screenshot goes to tests/output/ (git-ignored) for a person to look at. Skips where Chromium,
its driver or selenium is absent (scripts/deps.sh installs them where the distribution can)."""

import json
import os
import shutil

import pytest

from conftest import BACKEND, ROOT

TOKEN = "browser-test-token-77"
OUT_DIR = ROOT / "tests" / "output"


def find(*names):
    for n in names:
        p = shutil.which(n)
        if p:
            return p
    return None


@pytest.fixture
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (scripts/deps.sh installs it)")
    chromium, driver = find("chromium", "chromium-browser", "google-chrome"), find("chromedriver")
    if not chromium or not driver:
        pytest.skip("no chromium and chromedriver here (Debian: apt-get install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1800"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        b = webdriver.Chrome(service=Service(executable_path=driver), options=opts)
    except Exception as e:  # a browser that cannot start here (no display libraries, a sandbox refusal)
        pytest.skip(f"chromium does not start here: {str(e).splitlines()[0][:200]}")
    b.set_page_load_timeout(30)
    yield b
    b.quit()


def wait_for(b, predicate, what, timeout=40):
    from selenium.webdriver.support.ui import WebDriverWait
    WebDriverWait(b, timeout, poll_frequency=0.1).until(lambda _: predicate(), message=what)


def bars(b, chart):
    from selenium.webdriver.common.by import By
    return [{k: r.get_attribute(f"data-{k}") for k in ("kernel", "ms", "rate", "error", "status")}
            for r in b.find_elements(By.CSS_SELECTOR, f"#{chart} rect")]


def test_a_comparison_in_the_browser(browser, start_daemon, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select
    tok = tmp_path / "token"
    tok.write_text(TOKEN)
    d = start_daemon("--auth-token-file", str(tok))
    b = browser
    b.get(d.url("/"))
    assert b.title == "crunchd"
    # without the token the page says so, and draws nothing
    wait_for(b, lambda: "token" in b.find_element(By.ID, "status").text, "the page asks for the token")
    b.find_element(By.ID, "token").send_keys(TOKEN + Keys.TAB)  # typed, then left: its change event
    wait_for(b, lambda: b.find_elements(By.CSS_SELECTOR, "#kernel-table tbody tr"), "the kernel catalogue")
    wait_for(b, lambda: b.find_element(By.ID, "live-jobs").text != "–", "live rates (two scrapes of /metrics)")
    assert b.find_element(By.ID, "version").text.endswith(f"{BACKEND} backend")
    # a small GEMM comparison (the CPU's reference kernel is slow)
    Select(b.find_element(By.ID, "c-op")).select_by_visible_text("gemm")
    for fid, v in (("c-m", 96), ("c-n", 80), ("c-k", 64), ("c-seed", 5)):
        e = b.find_element(By.ID, fid)
        e.clear()
        e.send_keys(str(v))
    b.find_element(By.ID, "c-run").click()
    assert [b.find_element(By.ID, f).get_attribute("value") for f in ("c-m", "c-n", "c-k")] == ["96", "80", "64"]
    wait_for(b, lambda: b.execute_script("return document.body.dataset.compared") == "1", "the comparison's chart")
    answer = json.loads(b.find_element(By.ID, "compare-json").get_attribute("textContent"))
    kernels = answer["kernels"]
    assert answer["result"] is None and len(kernels) >= 2, answer
    for chart in ("chart-time", "chart-rate"):
        drawn = bars(b, chart)
        assert [x["kernel"] for x in drawn] == [k["kernel"] for k in kernels], (chart, drawn)
        for x, k in zip(drawn, kernels):
            assert float(x["ms"]) == k["ms"] and float(x["rate"]) == k["gflops"], (x, k)
            assert float(x["error"]) == k["max_rel_error"] and x["status"] == k["status"], (x, k)
    # bar lengths follow the values: the longest time bar is the slowest kernel
    widths = [float(r.get_attribute("width")) for r in b.find_elements(By.CSS_SELECTOR, "#chart-time rect")]
    assert widths.index(max(widths)) == max(range(len(kernels)), key=lambda i: kernels[i]["ms"])
    if BACKEND == "cuda":  # the roofline needs the device's peaks (none on cpu)
        assert b.find_elements(By.CSS_SELECTOR, "#roofline polyline.roof")
        assert len(b.find_elements(By.CSS_SELECTOR, "#roofline circle")) == sum(k["gflops"] > 0 for k in kernels)
    errors = [e for e in b.get_log("browser") if e["level"] == "SEVERE" and "401" not in e["message"]]
    assert not errors, errors  # the token-less first calls' 401s are expected; nothing else
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    shot = OUT_DIR / f"ui-compare-{BACKEND}.png"
    assert b.save_screenshot(str(shot)) and os.path.getsize(shot) > 10000
