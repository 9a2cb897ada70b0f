"""omni-loader: profile model-loading code, starting with vLLM-Omni's Qwen2.5-Omni Token2Wav loader."""

__version__ = "0.1.0"
