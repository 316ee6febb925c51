"""The system's Chromium (Debian's package; never a downloaded browser)."""

import shutil

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
