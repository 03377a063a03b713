"""The one lock around moto in a process: moto is not thread-safe, so the emulator's server, the
strict layer's reads of moto's backend and the local stack's own reads all hold it."""
import threading

EMULATOR_LOCK = threading.RLock()
