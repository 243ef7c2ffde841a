"""Hand-written request decoders for the requests clients send at rate (see codec.py)."""
