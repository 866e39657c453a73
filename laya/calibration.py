"""Calibration files: moved into `laya.calibrate` (one module); this name stays importable."""

from .calibrate import (CALIBRATION_VERSION, TEMPERATURE_KEYS, apply_calibration_payload,  # noqa: F401
                        calibration_payload, check_binning_map, read_calibration_json, write_calibration)
