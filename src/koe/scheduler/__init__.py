"""Who synthesizes next: deadline-ordered jobs across sessions, cancellation, admission control."""
