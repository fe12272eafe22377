"""The HTML reports (``--format html`` of compare, sweep and analyze --all): the page machinery
(pkbsim.report.html_page) without a browser, then each report loaded in a real headless
Chromium driven by selenium through Debian's chromedriver: no console errors, numeric sorting,
filtering, images that decode, a screenshot that is not blank.

The browser tests skip, saying why, where Chromium, its driver or selenium is missing
(.ci/run installs ``chromium chromium-driver`` with apt-get where it can).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from paths import DATA, ROOT
from PIL import Image

from pkbsim import __version__
from pkbsim.cli import main
from pkbsim.cli.provenance import listing_sha256, path_input, run_date
from pkbsim.report import html_page as page
from pkbsim.report.html_page import Cell, Provenance, sort_key

LOGS = DATA / "pkb_logs" / "logs"
DATE = "2026-01-02 03:04:05 UTC"
EPOCH = "1767323045"  # DATE as SOURCE_DATE_EPOCH
HOSTILE = '<script>alert("x")</script>&<img src=x onerror=alert(1)>'
HOSTILE_FOLDER = "<img src=x onerror=alert(1)> 'logs'"  # a legal folder name
PNG_URI = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"')

CHROMIUM = os.environ.get("PKBSIM_CHROMIUM") or shutil.which("chromium") \
    or shutil.which("chromium-browser")
CHROMEDRIVER = os.environ.get("PKBSIM_CHROMEDRIVER") or shutil.which("chromedriver")


def provenance(date: str = DATE) -> Provenance:
    return Provenance("pkbsim test --x 1", date, "dgx-h100", (("measured", "a/b (folder)"),))


def pngs(text: str) -> list[bytes]:
    return [base64.b64decode(m) for m in PNG_URI.findall(text)]


def tiny_png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 3), (200, 10, 10)).save(buffer, format="PNG")
    return buffer.getvalue()


# ---------------------------------------------------------------- the page, no browser

def test_sort_key_reads_numbers_and_leaves_text() -> None:
    assert sort_key("1,234.5") == 1234.5 and sort_key("45.3%") == 45.3
    assert sort_key("1.20x") == 1.2 and sort_key("12 us") == 12.0 and sort_key("-3e-05") == -3e-5
    assert sort_key("-") is None and sort_key("") is None
    for text in ("1_allreduce", "nan", "inf", "1 KiB", "roofline (2 us)", "v1.2.3"):
        assert sort_key(text) == text


def test_numeric_columns_sort_by_raw_values() -> None:
    rows: list[list[page.CellLike]] = [["b10", "9.5", Cell("1 MiB", 1048576), "comm"],
                                       ["b9", "10.25", Cell("4 KiB", 4096), "latency"],
                                       ["a", "-", Cell("-", None), "x"]]
    html = page.table(("name", "us", "size", "binding"), rows, "t")
    assert page.numeric_columns(("name", "us", "size", "binding"), rows) == [
        False, True, True, False]
    assert '<th tabindex="0">name</th><th data-type="num" tabindex="0">us</th>' in html
    assert '<td class="n" data-sort="10.25">10.25</td>' in html
    assert '<td class="n" data-sort="1048576">1 MiB</td>' in html
    assert '<td class="n" data-sort="">-</td>' in html and "<td>latency</td>" in html
    # a column with one word among numbers sorts as text
    assert page.numeric_columns(("a",), [["1"], ["two"]]) == [False]
    assert page.numeric_columns(("a",), [["-"], ["-"]]) == [False]


def test_hostile_text_is_escaped_everywhere() -> None:
    p = Provenance(HOSTILE, DATE, HOSTILE, ((HOSTILE, HOSTILE),))
    html = page.page(HOSTILE, [page.heading(HOSTILE), page.paragraph(HOSTILE, HOSTILE),
                               page.table((HOSTILE,), [[HOSTILE], [Cell(HOSTILE, 1.0)]],
                                          HOSTILE)], p)
    assert HOSTILE not in html and html.count("<img") == 0
    assert html.count("<script") == 1 and html.count("</script>") == 1  # the sorter alone
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;" in html


def test_image_embeds_png_only() -> None:
    png = tiny_png()
    html = page.image(png, "a <plot>")
    assert pngs(html) == [png] and 'alt="a &lt;plot&gt;"' in html
    with pytest.raises(ValueError, match="not a PNG"):
        page.image(b"<svg/>", "x")


def test_page_is_deterministic_but_for_the_date_line() -> None:
    body = [page.table(("a", "b"), [["x", "1"], ["y", "2"]], "t"), page.image(tiny_png(), "p")]
    first = page.page("T", body, provenance())
    assert page.page("T", body, provenance()) == first
    other = page.page("T", body, provenance("2030-12-31 23:59:59 UTC")).splitlines()
    changed = [(a, b) for a, b in zip(first.splitlines(), other, strict=True) if a != b]
    assert changed == [(f"<tr><th>date of the run</th><td>{DATE}</td></tr>",
                        "<tr><th>date of the run</th><td>2030-12-31 23:59:59 UTC</td></tr>")]


def test_page_needs_no_network() -> None:
    html = page.page("T", [page.image(tiny_png(), "p")], provenance())
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)|@import|url\(""", html)
    assert f"<tr><th>pkbsim</th><td>{__version__}</td></tr>" in html


def test_provenance_hashes_files_and_folders(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "logs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.json").write_bytes(b"1")
    (folder / "sub" / "b.json").write_bytes(b"2")
    one, two = (hashlib.sha256(b).hexdigest() for b in (b"1", b"2"))
    listing = hashlib.sha256(f"a.json {one}\nsub/b.json {two}\n".encode()).hexdigest()
    assert listing_sha256([("sub/b.json", two), ("a.json", one)]) == listing
    assert path_input(folder) == f"{folder} (folder: 2 files, sha256 {listing})"
    assert path_input(folder / "a.json") == f"{folder / 'a.json'} (sha256 {one})"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    assert run_date() == DATE


def test_command_line_is_the_options_not_at_their_default(tmp_path: Path) -> None:
    out = tmp_path / "a b.html"
    _run("analyze", "--all", "-w", "8", "--filter", "id=1-5", "--filter", "parallelism=TP",
         "--sort", "t_roof", "--reverse", "--no-predict", "--format", "html", "--out", str(out))
    assert (f"<tr><th>command</th><td>pkbsim analyze --all --world-size 8 --format html --out "
            f"&#x27;{out}&#x27; --filter id=1-5 --filter parallelism=TP --sort t_roof --reverse "
            "--no-predict</td></tr>") in out.read_text()


# ---------------------------------------------------------------- the three reports

def _run(*args: str) -> None:
    try:
        main(list(args))
    except SystemExit as exc:  # main exits only on an error
        raise AssertionError(f"pkbsim {' '.join(args)}: exit {exc.code}") from None


def _sweep(out: Path) -> None:
    _run("sweep", "--collective", "all_reduce", "--sizes", "1KiB:64MiB:x4", "--vary",
         "world_size=2,8", "--metric", "t_roof,binding,busbw", "--jobs", "1", "--format", "html",
         "--out", str(out))


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """compare (on a copy of the logs in a folder with a hostile name), sweep, analyze --all,
    each an HTML file, dated by SOURCE_DATE_EPOCH."""
    folder = tmp_path_factory.mktemp("reports")
    logs = folder / HOSTILE_FOLDER
    shutil.copytree(LOGS, logs)
    out = {name: folder / f"{name}.html" for name in ("compare", "sweep", "analyze")}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SOURCE_DATE_EPOCH", EPOCH)
        _run("compare", "--measured", str(logs), "--format", "html", "--out",
             str(out["compare"]))
        _sweep(out["sweep"])
        _run("analyze", "--all", "--format", "html", "--out", str(out["analyze"]))
    return out


REPORTS = ("compare", "sweep", "analyze")


@pytest.mark.parametrize("name", REPORTS)
def test_report_is_one_page_with_plots_and_provenance(reports: dict[str, Path],
                                                      name: str) -> None:
    html = reports[name].read_text()
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    images = pngs(html)
    assert images and len(images) == html.count("<img")
    for data in images:
        with Image.open(io.BytesIO(data)) as img:
            assert img.format == "PNG" and img.size[0] > 100
            img.verify()
    assert f"<tr><th>date of the run</th><td>{DATE}</td></tr>" in html
    assert f"<tr><th>pkbsim</th><td>{__version__}</td></tr>" in html
    command = {"compare": "pkbsim compare --measured", "sweep": "pkbsim sweep --collective "
               "all_reduce --vary world_size=2,8 --sizes 1KiB:64MiB:x4", "analyze":
               "pkbsim analyze --all --format html --out"}[name]
    assert f"<tr><th>command</th><td>{command}" in html
    assert "<tr><th>input: topology</th><td>topologies/dgx-h100.yaml (sha256 " in html
    assert html.count("<script") == 1 and 'data-type="num"' in html


def test_compare_page_escapes_a_hostile_folder_name(reports: dict[str, Path]) -> None:
    html = reports["compare"].read_text()
    assert HOSTILE_FOLDER not in html and "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt; &#x27;logs&#x27; (folder: 45 files, sha256" in html


def test_same_input_same_page(reports: dict[str, Path], tmp_path: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    again = tmp_path / "again.html"
    _sweep(again)
    first = reports["sweep"].read_text().replace(str(reports["sweep"]), "OUT")
    assert again.read_text().replace(str(again), "OUT") == first


def test_html_is_refused_where_it_does_not_apply(cli: Any) -> None:
    r = cli("analyze", "-t", "grpo", "--no-predict", "--format", "html")
    assert r.code == 2 and "--format html works with --all" in r.err


# ---------------------------------------------------------------- in a browser

@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not CHROMIUM or not CHROMEDRIVER:
        pytest.skip("no Chromium: the browser tests need chromium and chromedriver (Debian: "
                    "apt-get install chromium chromium-driver; or set PKBSIM_CHROMIUM and "
                    "PKBSIM_CHROMEDRIVER)")
    webdriver = pytest.importorskip("selenium.webdriver",
                                    reason="selenium is missing: pip install '.[test]'")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tmp_path_factory.mktemp("chromium-profile")
    # no background connections (update checks, sync, QUIC): CI's network may be closed
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--force-device-scale-factor=1", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-quic", f"--user-data-dir={profile}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


# per report: the header of a numeric column to sort, and a word to filter that column's table
CASES = {"compare": ("measured us", "cuda"), "sweep": ("t_roof_us", "latency"),
         "analyze": ("t_roof", "moe")}


def load(driver: Any, path: Path) -> list[dict[str, Any]]:
    """Open ``path``; the browser's log of the load."""
    driver.get_log("browser")  # drop what an earlier page logged
    driver.get(path.as_uri())
    return list(driver.get_log("browser"))


def table_with(driver: Any, header: str) -> Any:
    """The first table box whose header row has a column named ``header``."""
    from selenium.webdriver.common.by import By

    for box in driver.find_elements(By.CSS_SELECTOR, "div.table"):
        names = [th.text.strip(" \u25b2\u25bc") for th in box.find_elements(By.TAG_NAME, "th")]
        if header in names:
            return box, names.index(header)
    raise AssertionError(f"no table with a column {header!r}")


def column(driver: Any, box: Any, col: int) -> list[tuple[str, str | None]]:
    """(text, data-sort) of column ``col``, in the order shown."""
    return [tuple(x) for x in driver.execute_script(
        "var col = arguments[1];"
        "return Array.from(arguments[0].querySelector('tbody').rows).map(function (r) {"
        " return [r.cells[col].textContent, r.cells[col].getAttribute('data-sort')]; });",
        box, col)]


def shown_rows(driver: Any, box: Any) -> list[str]:
    return list(driver.execute_script(
        "return Array.from(arguments[0].querySelector('tbody').rows).filter(function (r) {"
        " return !r.hidden && r.offsetParent !== null; }).map(function (r) {"
        " return r.textContent; });", box))


@pytest.mark.parametrize("name", REPORTS)
def test_page_loads_without_console_errors(browser: Any, reports: dict[str, Path],
                                           name: str) -> None:
    log = load(browser, reports[name])
    assert [e for e in log if e["level"] in ("SEVERE", "WARNING")] == []
    counts = browser.execute_script(
        "return Array.from(document.querySelectorAll('span.count')).map(function (s) {"
        " return s.textContent; });")
    assert counts and all(re.fullmatch(r"\d+ rows", c) for c in counts)  # the script ran
    assert browser.execute_script("return document.scripts.length") == 1
    assert browser.execute_script("return document.querySelectorAll('[onerror]').length") == 0


@pytest.mark.parametrize("name", REPORTS)
def test_clicking_a_numeric_header_sorts_numerically(browser: Any, reports: dict[str, Path],
                                                     name: str) -> None:
    from selenium.webdriver.common.by import By

    load(browser, reports[name])
    header = CASES[name][0]
    box, col = table_with(browser, header)
    th = box.find_elements(By.TAG_NAME, "th")[col]
    assert th.get_attribute("data-type") == "num"
    pairs = [(float(k), t) for t, k in column(browser, box, col) if k]
    numbers = sorted(n for n, _ in pairs)
    assert len(numbers) >= 3
    # the test means something: these texts sorted as text come in another order
    assert sorted(t for _, t in pairs) != [t for _, t in sorted(pairs)]
    th.click()
    up = column(browser, box, col)
    assert [float(k) for _, k in up if k] == numbers and th.get_attribute("aria-sort") == \
        "ascending"
    assert all(not k for _, k in up[len(numbers):])  # missing values last
    shown = [sort_key(t) for t, k in up if k]
    assert shown == sorted(shown)  # the text agrees with the key
    th.click()
    down = column(browser, box, col)
    assert [float(k) for _, k in down if k] == numbers[::-1]
    assert th.get_attribute("aria-sort") == "descending"


@pytest.mark.parametrize("name", REPORTS)
def test_typing_in_the_filter_hides_rows(browser: Any, reports: dict[str, Path],
                                         name: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    load(browser, reports[name])
    header, word = CASES[name]
    box, _ = table_with(browser, header)
    every = shown_rows(browser, box)
    expected = [r for r in every if word in r.lower()]
    assert 0 < len(expected) < len(every)
    field = box.find_element(By.TAG_NAME, "input")
    field.send_keys(word.upper())  # case does not matter
    assert shown_rows(browser, box) == expected
    assert box.find_element(By.CSS_SELECTOR, "span.count").text == \
        f"{len(expected)} of {len(every)} rows"
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(Keys.BACKSPACE)
    assert shown_rows(browser, box) == every


@pytest.mark.parametrize("name", REPORTS)
def test_images_load_and_the_page_is_not_blank(browser: Any, reports: dict[str, Path],
                                               name: str) -> None:
    from selenium.webdriver.common.by import By

    load(browser, reports[name])
    sizes = browser.execute_script(
        "return Array.from(document.images).map(function (i) {"
        " return [i.complete, i.naturalWidth, i.naturalHeight]; });")
    assert sizes and all(done and w > 0 and h > 0 for done, w, h in sizes)
    shots = [browser.get_screenshot_as_png(),
             browser.find_element(By.TAG_NAME, "img").screenshot_as_png]
    for shot in shots:
        with Image.open(io.BytesIO(shot)) as img:
            colours = img.convert("RGB").getcolors(maxcolors=1 << 16)
            assert colours is None or len(colours) > 1  # None: more than 65,536 colours


def test_the_repository_examples_are_current() -> None:
    """docs/examples/ holds one report of each kind; each loads as this version's page."""
    for name in ("compare-h200-w1.html", "sweep-all-reduce.html", "analyze-all-dgx-h100.html"):
        html = (ROOT / "docs" / "examples" / name).read_text()
        assert f"<tr><th>pkbsim</th><td>{__version__}</td></tr>" in html and pngs(html)
        assert page.SCRIPT in html and page.CSS in html
