"""The engine behind one interface (client.Engine): local worker processes (client.py) or
Ray actors (ray.py, with the avatar files they are shipped, ray_avatars.py)."""
