"""Sequential seeds (`seeds: {start, max, step}`): each look judged, written, and its seeds
added (`sequential_seeds`)."""
