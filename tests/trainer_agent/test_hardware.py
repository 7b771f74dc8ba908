"""What a CPU agent reports about its hardware: NVML answers "unavailable" with its reason instead
of raising, and the heartbeat carries the CPU's model beside the datacenter's simulated GPUs (the
registry's count and model, no GPU memory). The CUDA side runs only on a GPU machine."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
import torch

from metatune.registry import default_registry
from metatune.settings import Settings
from metatune_trainer_agent.adapters.hardware import cpu_model, detect, nvml_status
from metatune_trainer_agent.app import create_service

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU machine: CUDA is reported")


def test_without_a_gpu_nvml_reports_unavailable_with_its_reason() -> None:
    status = nvml_status()
    assert status.available is False and status.gpus == ()
    assert status.reason and "\n" not in status.reason  # one line that says why


def test_a_cpu_agent_s_heartbeat_reports_its_cpu_and_the_datacenter_s_gpus(tmp_path: Path) -> None:
    hardware = detect()
    assert (hardware.device, hardware.gpus, hardware.memory_mib) == ("cpu", 0, None)
    assert hardware.model == (cpu_model() or platform.machine())

    agent = create_service("fra1", Settings(data_dir=tmp_path)).runtime
    status = agent.status()
    fra1 = default_registry().get("fra1")
    assert (status.device, status.device_model) == ("cpu", hardware.model)
    assert status.gpus_total == status.gpus_free == fra1.gpus  # simulated, one thread each
    assert status.gpu_model == fra1.gpu_model and status.gpu_memory_mib is None
