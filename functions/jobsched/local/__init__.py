"""The embedded local stack: the same handlers on an in-process AWS emulator (moto).

Adapters only: no scheduling rule lives here."""
