"""What the user writes against: the Module, the DataModule, batches and optimizers."""
