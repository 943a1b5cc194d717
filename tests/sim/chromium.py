"""Opens a report in headless Chromium (Debian's `chromium`, which
scripts/chromium.sh installs) and reads back what the page recorded: how
many charts drew, and every script error or console.error on the way."""

from __future__ import annotations

import re
import shutil
import subprocess

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")


def open_report(path: str) -> tuple[dict[str, str], str]:
    """(the <body>'s data- attributes after the page ran, Chromium's stderr)."""
    proc = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom", f"file://{path}"],
        capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", proc.stdout).group(1)
    return dict(re.findall(r'data-([a-z]+)="([^"]*)"', body)), proc.stderr
