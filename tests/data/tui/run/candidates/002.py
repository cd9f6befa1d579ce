import torch
import torch.nn as nn

# judge: build_error compile_error

class ModelNew(nn.Module):
    def forward(self, x):
        return x
