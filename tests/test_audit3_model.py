"""Audit 3, the model and checkpoint format (spec §3, §4): build_model's encoder source, the load-time
option_layout check."""

from __future__ import annotations

import json
import os

import pytest

MINI = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "laya", "laya_mini")


class ConfigRead(Exception):
    pass


def test_build_model_missing_encoder_dir_reads_the_base_encoder_config(monkeypatch, tmp_path):
    """§3.5: only an existing encoder_dir is read; a missing encoder/ folder falls back to cfg["encoder"]."""
    import transformers

    from laya.model import build_model

    seen = []

    def from_pretrained(name, *args, **kwargs):
        seen.append(name)
        raise ConfigRead

    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", from_pretrained)
    with pytest.raises(ConfigRead):
        build_model({"encoder": "base/encoder", "head_layers": 0}, str(tmp_path / "encoder"), pretrained=False)
    assert seen == ["base/encoder"]


def test_load_refuses_unknown_option_layout_with_the_published_text(tmp_path):
    """R-P2-1 / §3.9: an option_layout other than sequential/parallel is the uses_parallel_layout ValueError."""
    import laya

    with open(os.path.join(MINI, "rl_agent_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["option_layout"] = "diagonal"
    (tmp_path / "rl_agent_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    with pytest.raises(ValueError, match=r"^option_layout must be one of sequential, parallel, got 'diagonal'$"):
        laya.load(str(tmp_path), device="cpu")
