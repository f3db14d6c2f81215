"""The chat page served at `/`: static files shipped inside the package (no CDN, works offline)."""
