"""Law fits: the Approach-3 fitter, its batched form for bootstrap draws, each law per arm."""
