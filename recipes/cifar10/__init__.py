"""The CIFAR-10 recipe: a ResNet-9 style network and a DataModule over torchvision's CIFAR-10."""
