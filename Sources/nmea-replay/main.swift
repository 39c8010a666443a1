print("nmea-replay: not yet")
