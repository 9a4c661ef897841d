"""The CPU and the kernel set chosen for a workload (fcn.cpu): the user's value always stands,
nothing changes once TensorFlow has started, and a choice is made only where one was measured."""

from __future__ import annotations

import os
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fcn import cpu

FLAG_POOL = ["sse4_2", "avx", "avx2", "fma", "avx_vnni", "avx512f", "avx512_vnni", "avx512_bf16",
             "amx_tile", "amx_bf16"]  # fmt: skip
ONEDNN_BY_DEFAULT = {"avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_bf16"}
"""TensorFlow's rule (its cpu_feature_guard / IsMKLEnabled): with these it runs oneDNN."""


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # patched within
@given(
    flags=st.frozensets(st.sampled_from(FLAG_POOL)),
    workload=st.sampled_from(cpu.WORKLOADS),
    user_value=st.sampled_from([None, "0", "1", "true"]),
    started=st.booleans(),
)
def test_a_choice_never_overrides_the_user_nor_comes_too_late(
    monkeypatch, flags, workload, user_value, started
):
    with monkeypatch.context() as patch, mock.patch.dict(os.environ):  # the variable restored
        patch.setattr(cpu, "cpu_info", lambda: ("a CPU", flags))
        patch.setattr(cpu, "_tensorflow_started", lambda: started)
        patch.setattr(cpu, "_chosen", None)
        if user_value is None:
            patch.delenv(cpu.ONEDNN_VARIABLE, raising=False)
        else:
            patch.setenv(cpu.ONEDNN_VARIABLE, user_value)
        chosen = cpu.choose_kernels(workload)
        value = os.environ.get(cpu.ONEDNN_VARIABLE)
        note = cpu.kernels_note()
    avx2_only = "avx2" in flags and not flags & {"avx512f", *ONEDNN_BY_DEFAULT}  # measured class
    if user_value is not None or started or not avx2_only:
        assert chosen is None and value == user_value and note == ""
    else:
        assert chosen in ("oneDNN", "Eigen")
        assert value == {"oneDNN": "1", "Eigen": "0"}[chosen]
        assert f"fcn's choice for {workload} on AVX2-only CPUs" in note
        other = "Eigen" if chosen == "oneDNN" else "oneDNN"
        assert note.endswith(f"for {other}") and f"={value}" not in note


def test_an_unknown_workload_is_refused_by_name():
    with pytest.raises(ValueError, match="'serving'.*training, inference"):
        cpu.fastest_kernels("serving")
