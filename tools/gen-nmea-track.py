#!/usr/bin/env python3
"""Generate data/track.nmea: a deterministic NMEA 0183 track of a car driving a
loop through central Berlin (Mitte), for tests, benchmarks and `make run`.

Usage:  python3 tools/gen-nmea-track.py [OUTPUT]      (default: data/track.nmea)

Python 3 standard library only. The output depends only on SEED below, so
regenerating it gives byte-identical output.

File format
-----------
Plain ASCII, one NMEA sentence per line, LF line endings (gpsd accepts LF or
CRLF; the replayer sends each line as one UDP datagram and appends CRLF).
Lines starting with '#' are not written; the file holds only sentences.
One epoch per second of UTC time, with exactly three sentences in this order:

  $GPGGA,hhmmss.00,ddmm.mmmmm,N,dddmm.mmmmm,E,q,ss,hdop,alt,M,geoid,M,,*CS
      fix time, position, quality (1 = GPS fix), satellites used, HDOP,
      altitude above mean sea level (m), geoid separation (m).
  $GPGSA,A,3,p1,...,p12,pdop,hdop,vdop*CS
      automatic 3D fix, the PRNs used (12 slots, empty ones blank), DOPs.
  $GPRMC,hhmmss.00,A,ddmm.mmmmm,N,dddmm.mmmmm,E,knots,course,ddmmyy,,,A*CS
      same time and position, speed over ground (knots), course over ground
      (degrees true), date; 'A' = valid, final 'A' = autonomous mode.

CS is the two-digit upper-case hex XOR of every byte between '$' and '*'.
Epochs follow each other directly (no blank line), UTC time incrementing by
exactly one second, starting 2024-06-14 10:00:00 UTC.

The drive: a closed loop (so --loop replays without a jump) from Spandauer
Strasse near the TV tower (52.5200 N, 13.4050 E) along Karl-Liebknecht-Strasse
and Unter den Linden to Friedrichstrasse, south to Leipziger Strasse, east to
Spittelmarkt and Muehlendamm, and north on Spandauer Strasse back to the start.
About 4.2 km in about 8 minutes: the car accelerates and brakes smoothly (at
most 2.5 m/s^2), slows for turns, stops at a few traffic lights, and cruises at a speed that varies per street
and wobbles with the traffic (10-14 m/s). Positions
are integrated from the speed and course, so speed/course agree with the
position change between epochs; no position noise is added. HDOP, satellites
and altitude vary slowly (seeded random walk).
"""

import math
import os
import random
import sys

SEED = 20240614
START = (2024, 6, 14, 10, 0, 0)        # UTC
EARTH_R = 6371008.8                    # mean Earth radius, metres
MS_TO_KNOTS = 3600.0 / 1852.0

# (lat, lon) waypoints of the loop, roughly along real streets of Berlin-Mitte.
WAYPOINTS = [
    (52.52000, 13.40500),  # start: Spandauer Str. by the Marienkirche
    (52.51900, 13.40150),  # Karl-Liebknecht-Str., Liebknecht bridge
    (52.51760, 13.39740),  # Lustgarten / Schlossplatz
    (52.51710, 13.39300),  # Unter den Linden, Staatsoper
    (52.51690, 13.38880),  # Unter den Linden x Friedrichstr.
    (52.51430, 13.38940),  # Friedrichstr. x Franzoesische Str.
    (52.51140, 13.39000),  # Friedrichstr. x Leipziger Str.
    (52.51100, 13.39700),  # Leipziger Str. x Jerusalemer Str.
    (52.51150, 13.40300),  # Spittelmarkt
    (52.51300, 13.40800),  # Gertraudenbruecke / Fischerinsel
    (52.51480, 13.40950),  # Muehlendamm
    (52.51700, 13.40700),  # Spandauer Str. x Rathausstr.
    (52.51950, 13.40530),  # Spandauer Str.
    (52.52000, 13.40500),  # back at the start
]

# Waypoint indices with a traffic light: (index, seconds standing still).
LIGHTS = {4: 14, 6: 9, 9: 11}

CRUISE = 13.0       # m/s (~47 km/h)
TURN_SPEED = 4.5    # m/s through sharp corners
ACCEL = 2.0         # m/s^2
DECEL = 2.5         # m/s^2


def bearing(a, b):
    """Initial great-circle bearing from a to b, degrees true."""
    la1, lo1, la2, lo2 = map(math.radians, (a[0], a[1], b[0], b[1]))
    y = math.sin(lo2 - lo1) * math.cos(la2)
    x = math.cos(la1) * math.sin(la2) - math.sin(la1) * math.cos(la2) * math.cos(lo2 - lo1)
    return math.degrees(math.atan2(y, x)) % 360.0


def distance(a, b):
    """Haversine distance in metres."""
    la1, lo1, la2, lo2 = map(math.radians, (a[0], a[1], b[0], b[1]))
    h = math.sin((la2 - la1) / 2) ** 2 + math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2
    return 2 * EARTH_R * math.asin(math.sqrt(h))


def turn_angle(i):
    """Heading change (degrees, 0..180) at interior waypoint i."""
    if i <= 0 or i >= len(WAYPOINTS) - 1:
        return 180.0
    b1 = bearing(WAYPOINTS[i - 1], WAYPOINTS[i])
    b2 = bearing(WAYPOINTS[i], WAYPOINTS[i + 1])
    d = abs(b2 - b1) % 360.0
    return 360.0 - d if d > 180.0 else d


def corner_speed(i):
    """Speed allowed when passing waypoint i (0 at lights and at the end)."""
    if i in LIGHTS or i >= len(WAYPOINTS) - 1:
        return 0.0
    a = turn_angle(i)
    if a < 15:
        return CRUISE
    # Sharper corners are taken slower; 90 degrees or more at TURN_SPEED.
    f = min(1.0, (a - 15) / 75.0)
    return CRUISE - f * (CRUISE - TURN_SPEED)


def nmea_checksum(body):
    cs = 0
    for ch in body.encode("ascii"):
        cs ^= ch
    return "%02X" % cs


def sentence(body):
    return "$%s*%s" % (body, nmea_checksum(body))


def fmt_angle(value, degree_digits, positive, negative):
    """NMEA (d)ddmm.mmmmm and its hemisphere letter."""
    hemi = positive if value >= 0 else negative
    value = abs(value)
    deg = int(value)
    minutes = round((value - deg) * 60.0, 5)
    if minutes >= 60.0:
        deg, minutes = deg + 1, 0.0
    return "%0*d%08.5f" % (degree_digits, deg, minutes), hemi


def fmt_lat(lat):
    return fmt_angle(lat, 2, "N", "S")


def fmt_lon(lon):
    return fmt_angle(lon, 3, "E", "W")


def move(pos, course_deg, metres):
    """Destination point after `metres` along `course_deg` (great circle)."""
    la1, lo1 = math.radians(pos[0]), math.radians(pos[1])
    brg = math.radians(course_deg)
    d = metres / EARTH_R
    la2 = math.asin(math.sin(la1) * math.cos(d) + math.cos(la1) * math.sin(d) * math.cos(brg))
    lo2 = lo1 + math.atan2(math.sin(brg) * math.sin(d) * math.cos(la1),
                           math.cos(d) - math.sin(la1) * math.sin(la2))
    return (math.degrees(la2), math.degrees(lo2))


def simulate(rng):
    """Yield (lat, lon, speed m/s, course deg) once per second.

    The car follows the polyline, integrated in 0.1 s steps: each step it
    picks a speed within the acceleration limits that still lets it brake to
    the next corner's speed (0 at lights and at the end), then moves that far
    along the polyline. The reported speed is the distance covered during the
    last second and the course is the heading of that chord, so both agree
    with the position change between epochs; while stopped the course keeps
    its last value.
    """
    dt = 0.1
    seg = 0                 # current segment: WAYPOINTS[seg] -> WAYPOINTS[seg+1]
    along = 0.0             # metres travelled along the current segment
    speed = 0.0
    course = bearing(WAYPOINTS[0], WAYPOINTS[1])
    pos = WAYPOINTS[0]
    wait = 6.0              # engine idling at the start before pulling away
    finished = False
    # Traffic: each segment has its own cruising speed, plus a slow wobble.
    seg_cruise = [rng.uniform(10.5, CRUISE) for _ in WAYPOINTS]
    t = 0.0
    yield pos[0], pos[1], 0.0, course
    while not finished:
        start = pos
        for _ in range(10):
            t += dt
            if wait > 0:
                wait -= dt
                continue
            cruise = seg_cruise[seg] + 0.8 * math.sin(t / 9.0) * math.sin(t / 4.3)
            seg_len = distance(WAYPOINTS[seg], WAYPOINTS[seg + 1])
            remaining = seg_len - along
            target_end = corner_speed(seg + 1)
            # Highest speed from which we can still brake to target_end in `remaining`.
            v_brake = math.sqrt(target_end ** 2 + 2 * DECEL * max(0.0, remaining))
            new_speed = min(cruise, speed + ACCEL * dt, v_brake)
            new_speed = max(new_speed, speed - DECEL * dt * 1.2, 0.0)
            if target_end == 0.0:
                new_speed = max(new_speed, 0.8 if remaining > 0.05 else 0.0)  # roll up to the line
            step = (speed + new_speed) / 2.0 * dt
            speed = new_speed
            if step >= remaining:
                # Reached the next waypoint.
                step -= remaining
                seg += 1
                along = 0.0
                if seg >= len(WAYPOINTS) - 1:
                    pos = WAYPOINTS[-1]
                    finished = True
                    break
                if seg in LIGHTS:
                    speed, step, wait = 0.0, 0.0, float(LIGHTS[seg])
            along += step
            a, b = WAYPOINTS[seg], WAYPOINTS[seg + 1]
            pos = move(a, bearing(a, b), along)
        moved = distance(start, pos)
        if moved > 0.3:
            course = bearing(start, pos)
        yield pos[0], pos[1], moved, course


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "data", "track.nmea")
    rng = random.Random(SEED)

    # Slowly varying receiver state.
    sats = 9
    hdop = 0.9
    alt = 36.0          # metres above MSL (Berlin-Mitte is ~35 m)
    geoid = 39.6        # EGM96 separation around Berlin
    all_prns = [2, 5, 7, 9, 13, 14, 15, 17, 19, 20, 24, 28, 30]

    y, mo, d, h, mi, s = START
    t0 = ((h * 60) + mi) * 60 + s
    lines = []
    for n, (lat, lon, v, course) in enumerate(simulate(random.Random(SEED + 1))):
        # Receiver state random walk.
        if rng.random() < 0.08:
            sats = min(12, max(6, sats + rng.choice((-1, 1))))
        hdop = min(2.5, max(0.6, hdop + rng.uniform(-0.05, 0.05) + (1.0 - sats / 10.0) * 0.02))
        pdop = round(hdop * 1.7 + 0.1, 1)
        vdop = round(math.sqrt(max(0.01, pdop ** 2 - hdop ** 2)), 1)
        alt = min(45.0, max(30.0, alt + rng.uniform(-0.3, 0.3)))

        t = t0 + n
        hh, mm, ss = (t // 3600) % 24, (t // 60) % 60, t % 60
        tstr = "%02d%02d%02d.00" % (hh, mm, ss)
        dstr = "%02d%02d%02d" % (d, mo, y % 100)
        la, ns = fmt_lat(lat)
        lo, ew = fmt_lon(lon)
        prns = all_prns[:sats]
        prn_fields = [("%02d" % p) for p in prns] + [""] * (12 - len(prns))

        lines.append(sentence("GPGGA,%s,%s,%s,%s,%s,1,%02d,%.1f,%.1f,M,%.1f,M,," %
                              (tstr, la, ns, lo, ew, sats, hdop, alt, geoid)))
        lines.append(sentence("GPGSA,A,3,%s,%.1f,%.1f,%.1f" %
                              (",".join(prn_fields), pdop, hdop, vdop)))
        lines.append(sentence("GPRMC,%s,A,%s,%s,%s,%s,%.2f,%.1f,%s,,,A" %
                              (tstr, la, ns, lo, ew, v * MS_TO_KNOTS, course, dstr)))

    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    print("%s: %d epochs" % (out, len(lines) // 3), file=sys.stderr)


if __name__ == "__main__":
    main()
