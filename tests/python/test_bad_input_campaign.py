"""The bad-input campaign's CI subset (tools/fuzz/bad_input_campaign.py --quick): every case either
runs or raises tessera's named error with its outputs untouched; no crash, hang or bare exception."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_quick_campaign_has_no_failures():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "fuzz", "bad_input_campaign.py"), "--quick",
                        "--timeout", "30"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "bad-input campaign:" in r.stdout and "FAIL" not in r.stdout
