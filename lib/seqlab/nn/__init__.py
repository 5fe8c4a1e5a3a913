"""From-scratch sequence models with torch.nn-compatible APIs."""
