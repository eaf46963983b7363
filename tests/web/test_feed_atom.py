"""The Atom feed of followed things as a real feed reader reads it: Python's feedparser (PyPI; installed by
scripts/install-deps.sh) parses `kindex feed --atom` and what `kindex serve` serves at /feed.xml and
/feeds/<kind>/<value>.xml, over KernelIndex's export slice with a model and a GPU followed.

KINDEX_BINARY names the kindex executable (ctest sets it).
"""

import calendar
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import feedparser
import pytest

REPO = Path(__file__).resolve().parents[2]
SLICE = REPO / "tests" / "data" / "kernelindex" / "export-slice-gqa.jsonl.zst"
KINDEX = os.environ.get("KINDEX_BINARY", str(REPO / "build" / "bin" / "kindex"))


def kindex(*args, cwd):
    env = {k: v for k, v in os.environ.items() if k != "KINDEX_STORE"}
    done = subprocess.run([KINDEX, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def store():
    work = Path(tempfile.mkdtemp(prefix="kindex-atom-"))
    kindex("import", "--store", "s.db", str(SLICE), cwd=work)
    kindex("follow", "model", "llama-3-1-8b", "--store", "s.db", cwd=work)
    kindex("follow", "gpu", "B200", "--store", "s.db", cwd=work)
    yield work
    shutil.rmtree(work)


def check_atom(text):
    parsed = feedparser.parse(text)
    assert not parsed.bozo, parsed.get("bozo_exception")
    assert parsed.version == "atom10"
    assert parsed.feed.title.startswith("kindex")
    assert parsed.feed.updated_parsed is not None
    assert parsed.entries, "the feed has no entries"
    ids = set()
    for entry in parsed.entries:
        assert entry.id.startswith("urn:kindex:")
        assert entry.title
        assert entry.updated_parsed is not None
        assert entry.link
        ids.add(entry.id)
    assert len(ids) == len(parsed.entries), "entry ids repeat"
    times = [calendar.timegm(e.updated_parsed) for e in parsed.entries]
    assert times == sorted(times, reverse=True), "entries are not newest first"
    return parsed


def test_cli_atom_is_a_valid_feed_of_what_is_followed(store):
    parsed = check_atom(kindex("feed", "--atom", "--limit", "5000", "--store", "s.db", cwd=store))
    kinds = {t.term for e in parsed.entries for t in e.get("tags", [])}
    assert kinds == {"new_run", "new_record", "record_change"}, kinds
    # A record that moved names both holders and their ratio.
    moved = [e for e in parsed.entries if any(t.term == "record_change" for t in e.get("tags", []))]
    assert moved
    for e in moved:
        assert " → " in e.title and re.search(r"\(\d+(\.\d+)?×\)", e.title), e.title
    # --since keeps the newer entries only.
    middle = parsed.entries[len(parsed.entries) // 2]
    newer = check_atom(kindex("feed", "--atom", "--limit", "5000", "--since", middle.updated, "--store", "s.db",
                              cwd=store))
    # kindex writes every instant as YYYY-MM-DDTHH:MM:SS.mmmZ, so the text orders as the time does.
    assert [e.id for e in newer.entries] == [e.id for e in parsed.entries if e.updated >= middle.updated]
    assert len(newer.entries) < len(parsed.entries) or parsed.entries[-1].updated == middle.updated


def test_served_feeds_parse_with_absolute_links(store):
    server = subprocess.Popen([KINDEX, "serve", "--store", "s.db", "--port", "0"], cwd=store,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        port = None
        deadline = time.time() + 60
        while port is None and time.time() < deadline:
            line = server.stdout.readline()
            found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
            port = int(found.group(1)) if found else None
        assert port, "kindex serve printed no address"
        base = f"http://127.0.0.1:{port}"
        for path in ["/feed.xml", "/feeds/model/llama-3-1-8b.xml", "/feeds/gpu/NVIDIA%20B200.xml"]:
            with urllib.request.urlopen(base + path, timeout=30) as reply:
                assert reply.headers["Content-Type"].startswith("application/atom+xml")
                parsed = check_atom(reply.read())
            self_links = [link.href for link in parsed.feed.links if link.rel == "self"]
            assert self_links == [base + path], parsed.feed.links
            assert all(e.link.startswith(base + "/") for e in parsed.entries)
    finally:
        server.terminate()
        server.wait(timeout=30)
