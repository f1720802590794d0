"""What helpers keep: OnPolicyHelper, ExpReplayHelper, replay buffers, the sum tree, n-step returns."""
