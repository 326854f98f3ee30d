"""What the controller-side plugins share: the knowledge loader, the role actions' common steps."""
