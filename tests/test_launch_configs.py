"""The shipped accelerate configs: accelerate reads them, and they say what the README promises."""

from __future__ import annotations

from pathlib import Path

import pytest
from accelerate.commands.config.config_args import ClusterConfig
from accelerate.utils import DistributedType

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "accelerate"


@pytest.mark.parametrize("name, processes, kind", [("one_gpu.yaml", 1, DistributedType.NO),
                                                   ("zero3_8gpu.yaml", 8, DistributedType.DEEPSPEED)])
def test_accelerate_reads_the_shipped_configs(name, processes, kind):
    config = ClusterConfig.from_yaml_file(CONFIGS / name)
    assert config.num_processes == processes and config.distributed_type == kind
    assert config.mixed_precision == "bf16" and not config.use_cpu and config.num_machines == 1
    if kind == DistributedType.DEEPSPEED:
        assert config.deepspeed_config["zero_stage"] == 3 and config.deepspeed_config["zero3_save_16bit_model"]
