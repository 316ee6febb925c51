"""A session published beyond its viewers: RTMP and WHIP broadcasts, to the operator's
allowed targets only."""
