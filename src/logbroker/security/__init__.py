"""Authentication mechanisms as pure state machines: SASL PLAIN and SCRAM, JAAS settings, and
Kafka's principal names. No sockets, no asyncio: `server/authenticator.py` drives them.
"""
