"""What travels on a link: bus maps and their schema, the codecs of their messages with CRCs and
rolling counters, the protection those give, serial packet framing, codec tables for compiled
encoders and decoders, and named signals read from and written to frames."""
