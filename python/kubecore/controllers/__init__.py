"""The built-in controllers and the controller manager (see base.py for how they plug in)."""
