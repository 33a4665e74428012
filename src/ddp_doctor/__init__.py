"""ddp-doctor: does this PyTorch + CUDA environment really run distributed training?"""

__version__ = "0.1.0"
