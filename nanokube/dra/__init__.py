"""Helpers about DRA objects that the scheduler, controllers and node agents share."""
