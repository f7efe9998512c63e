"""sunkctl: thin commands over the library; the library never prints."""
