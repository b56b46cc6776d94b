"""The documentation site builds without a warning, and a real headless browser finds its pages, navigation and images.

The site is built with ``mkdocs build --strict`` into a temporary folder and served over HTTP on 127.0.0.1.
Chromium (Debian's ``chromium`` package) loads every page of the navigation in one check page, whose script
reports what each page shows once all of them (and their images) have loaded. Without Chromium the browser
tests skip, except in CI (``CI`` set, as ``.ci/run`` does), where they fail.
"""

from __future__ import annotations

import functools
import html
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from support import in_ci

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = next(
    (shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)), None
)


def _nav_pages(entries) -> list[tuple[str, str]]:
    """Return (title, source file) for every page of mkdocs.yml's navigation, sections flattened."""
    pages = []
    for entry in entries:
        for title, target in entry.items():
            pages += _nav_pages(target) if isinstance(target, list) else [(title, target)]
    return pages


NAV = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])


def _url(source: str) -> str:
    """Return the site path of a page (mkdocs' directory URLs: ``a/b.md`` -> ``a/b/``)."""
    stem = source[: -len(".md")]
    return "" if stem == "index" else ("" if stem.endswith("/index") else stem + "/")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    return out


@pytest.fixture(scope="module")
def served(site):
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *args: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    thread.join()


@pytest.fixture(scope="module")
def chromium():
    if CHROMIUM is None:
        message = "Chromium is not installed (apt-get install -y chromium); the browser checks of the site did not run"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM


def _browse(chromium: str, url: str, *extra: str, tmp: Path) -> str:
    run = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            f"--user-data-dir={tmp}",
            "--virtual-time-budget=20000",
            *extra,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def test_every_page_of_docs_is_in_the_navigation_once():
    sources = [source for _, source in NAV]
    assert len(sources) == len(set(sources)), "a page is twice in mkdocs.yml's nav"
    pages = {str(page.relative_to(ROOT / "docs")) for page in (ROOT / "docs").rglob("*.md")}
    assert pages - set(sources) == set(), "add these pages to mkdocs.yml's nav"


def test_every_page_of_the_navigation_is_built_with_the_configuration_and_the_api_generated(site):
    for title, source in NAV:
        assert (site / _url(source) / "index.html").is_file(), f"{title}: {source} was not built"
    configuration = (site / "configuration" / "index.html").read_text(encoding="utf-8")
    from langgraph_compaction import CompactionConfig

    for name in CompactionConfig.model_fields:
        assert re.search(rf"<code[^>]*>{name}[.<]", configuration), f"the configuration table has no row for {name}"
    reference = (site / "reference" / "fronts" / "index.html").read_text(encoding="utf-8")
    assert "add_compaction" in reference and "Insert gate" in reference  # rendered from the docstring
    assert 'id="langgraph_compaction.engine.nodes.CompactionEngine.gate"' in reference  # the node methods
    assert (site / "results" / "report" / "index.html").is_file() and (site / "results" / "billed_cost.png").is_file()


def test_every_public_name_is_in_the_api_reference(site):
    import langgraph_compaction

    pages = "".join(page.read_text(encoding="utf-8") for page in (site / "reference").rglob("index.html"))
    anchors = set(re.findall(r'id="langgraph_compaction\.[\w.]*?\.(\w+)"', pages))
    missing = [
        name for name in langgraph_compaction.__all__ if name not in anchors and f"<code>{name}</code>" not in pages
    ]
    assert missing == []


def test_every_setting_has_a_meaning_on_the_configuration_page():
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    rows = hooks.config_rows()
    assert [setting for setting, _, meaning, _ in rows if not meaning] == [], (
        "give these fields a Field(description=...)"
    )
    names = {re.sub(r"<[^>]+>", "", setting) for setting, *_ in rows}  # each name is a <code> element
    assert names >= hooks.HARNESS_SETTINGS | set(hooks.DEVIATIONS)


CHECK_PAGE = """<!doctype html><html><body><pre id="report">loading</pre>{frames}
<script>
window.addEventListener("load", () => {{
  const pages = [...document.querySelectorAll("iframe")].map((frame) => {{
    const doc = frame.contentDocument;
    return {{
      url: frame.getAttribute("src"),
      title: doc.querySelector("h1") ? doc.querySelector("h1").textContent.trim() : null,
      nav: [...doc.querySelectorAll("nav.md-nav--primary a.md-nav__link")].map((a) => a.textContent.trim()),
      images: [...doc.images].map((img) => ({{src: img.getAttribute("src"), width: img.naturalWidth}})),
    }};
  }});
  document.getElementById("report").textContent = JSON.stringify(pages);
}});
</script></body></html>"""


def test_a_browser_loads_every_page_with_its_navigation_and_images(site, served, chromium, tmp_path):
    frames = "".join(
        f'<iframe src="{html.escape(served + _url(source))}" width="1200" height="800"></iframe>' for _, source in NAV
    )
    (site / "check.html").write_text(CHECK_PAGE.format(frames=frames), encoding="utf-8")
    dom = _browse(chromium, served + "check.html", "--dump-dom", tmp=tmp_path)
    report = json.loads(html.unescape(dom.split('<pre id="report">', 1)[1].split("</pre>", 1)[0]))
    assert len(report) == len(NAV)
    titles = [title for title, _ in NAV]
    for page in report:
        assert page["title"], f"{page['url']} shows no heading"
        assert set(titles) <= set(page["nav"]), f"{page['url']}: navigation lacks {set(titles) - set(page['nav'])}"
        broken = [image["src"] for image in page["images"] if image["width"] == 0]
        assert broken == [], f"{page['url']}: images that did not load: {broken}"
    images = {image["src"].rsplit("/", 1)[-1] for page in report for image in page["images"]}
    assert {"demo.png", "graph.svg", "billed_cost.png"} <= images


def test_the_index_page_renders_in_a_browser(served, chromium, tmp_path):
    shot = tmp_path / "index.png"
    _browse(chromium, served, f"--screenshot={shot}", "--window-size=1280,900", tmp=tmp_path / "profile")
    # a blank or unstyled page compresses to a few kilobytes; the rendered page with its picture is much larger
    assert shot.is_file() and shot.stat().st_size > 50_000
