import torch
import torch.nn as nn

# judge: rejected torch_fallback

class ModelNew(nn.Module):
    def forward(self, x):
        return x
