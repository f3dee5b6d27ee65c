"""The MNIST recipe: a compact CNN and a DataModule over torchvision's MNIST."""
