"""Framework bridges: ONNX and PyTorch models into opgraph Functions."""
