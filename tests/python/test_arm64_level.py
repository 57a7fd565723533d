"""The level the dispatcher picks on AArch64 (scripts/test_arm64.sh runs the Python suite's ARM subset under
qemu-aarch64 -cpu max and -cpu cortex-a57 and names the level each model must give in
TESSERA_SMOKE_EXPECT_ISA). Skipped on other machines: the x86 levels are checked by scripts/smoke_qemu.sh."""

import os
import platform

import pytest

import tessera

pytestmark = pytest.mark.skipif(platform.machine() != "aarch64", reason="AArch64 only (scripts/test_arm64.sh)")


def test_active_level_is_the_expected_one():
    info = tessera.cpu_info()
    want = os.environ.get("TESSERA_SMOKE_EXPECT_ISA")
    if want is None:
        assert info["active_isa"] in ("neon", "sve"), info
    else:
        assert info["active_isa"] == want, info
    # Nothing capped it: the active level is the best this CPU model offers.
    assert info["active_isa"] == info["best_isa"], info
