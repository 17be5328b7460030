"""Client sessions and their breakers, and the handshake-era sessions saved across a
tray restart (their rows, the files, the store).
"""
