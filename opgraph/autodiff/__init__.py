"""Reverse-mode automatic differentiation over each op's ``vjp``."""

from opgraph.autodiff.grad import backprop, gradients, zeros_like

__all__ = ["backprop", "gradients", "zeros_like"]
