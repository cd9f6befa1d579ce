import torch
import torch.nn as nn

# judge: correct none 0.21

class ModelNew(nn.Module):
    def forward(self, x):
        return x
