"""Exported runtimes of a DecisionModel: ONNX graphs (`laya.export.onnx`) and AOTInductor packages
(`laya.export.aoti`), plus the synthetic inputs both exporters trace and verify with (`examples`)."""
