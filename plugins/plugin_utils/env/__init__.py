"""Environment profiles and the container plan."""
