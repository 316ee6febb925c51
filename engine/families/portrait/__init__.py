"""A portrait avatar: one photo, analysed once, warped by a face rig, with a synthesised mouth interior."""
