/// Reduced accuracy: positions snapped to the centre of a cell of a fixed grid.
///
/// Why a *fixed* grid: if the coarse position were the true one plus noise, or a
/// cell placed relative to the first fix of a session, an app could ask again and
/// again (or across sessions) and average the answers back to the truth. Snapping
/// to cells that are fixed in space makes the answer a pure function of the true
/// position: every query from the same place returns the very same centre, so
/// averaging gains nothing. The most that repeated queries can learn is which of
/// neighbouring cells someone moves between, i.e. that they are near a boundary;
/// that is inherent in any fixed grid and bounded by the cell size.
///
/// The grid: latitude bands of about `cellSize` metres, tiling [-90°, 90°]
/// exactly from the south pole (so no band reaches past a pole); each band is cut
/// into a whole number of equal longitude cells tiling [-180°, 180°) from the
/// antimeridian, as many as keep a cell at most `cellSize` wide at the band's
/// centre latitude. Cells therefore never straddle the dateline, and towards the
/// poles a band has fewer, wider (in degrees) cells, down to a handful around the
/// pole itself. Metres per degree use the WGS84 mean sphere (≈ 111 195 m).
public struct ReducedGrid: Equatable, Sendable {
    /// The cell size in metres this grid was made with (after clamping).
    public let cellSize: Double
    /// Height of a band in degrees (180 / bandCount).
    let bandHeight: Double
    /// Number of latitude bands.
    let bandCount: Int

    /// A grid of cells about `metres` on a side. Non-finite sizes fall back to the
    /// configured default (5000 m); sizes are clamped to [1 m, 20 000 km].
    public init(cellSize metres: Double) {
        let size = metres.isFinite ? min(max(metres, 1), 20_000_000) : 5000
        cellSize = size
        let rawHeight = size / GeoMath.metresPerDegree
        let n = max(1, Int((180 / rawHeight).rounded(.up)))
        bandCount = n
        bandHeight = 180 / Double(n)
    }

    /// One cell of the grid: its centre and corners in degrees.
    struct Cell: Equatable {
        var band: Int
        var column: Int
        var columns: Int
        var south: Double, north: Double
        var west: Double, east: Double
        var centreLatitude: Double { (south + north) / 2 }
        var centreLongitude: Double { (west + east) / 2 }
    }

    /// `x` floored to an index in 0..<count; NaN goes to 0 rather than trapping.
    private static func index(_ x: Double, count: Int) -> Int {
        guard x.isFinite else { return x == .infinity ? count - 1 : 0 }
        let f = x.rounded(.down)
        if f < 0 { return 0 }
        if f >= Double(count - 1) { return count - 1 }
        return Int(f)
    }

    /// Number of longitude cells in band `band`.
    func columns(inBand band: Int) -> Int {
        let centre = -90 + (Double(band) + 0.5) * bandHeight
        let cosine = GeoMath.cos(centre * GeoMath.radiansPerDegree)
        // Cells at most cellSize wide at the band centre: ceil(circumference / cellSize),
        // written in degrees. A polar band keeps at least one cell.
        let widthDegrees = bandHeight / max(cosine, 1e-12)
        let raw = (360 / widthDegrees).rounded(.up)
        return raw < 1 ? 1 : Int(min(raw, Double(Int32.max)))
    }

    /// The cell holding (latitude, longitude). Latitude is clamped to [-90, 90]
    /// and longitude wrapped into [-180, 180).
    func cell(latitude: Double, longitude: Double) -> Cell {
        let lat = latitude.isFinite ? min(max(latitude, -90), 90) : 0
        let band = Self.index((lat + 90) / bandHeight, count: bandCount)
        let lon = longitude.isFinite ? GeoMath.normalizedLongitude(longitude) : 0
        let columns = columns(inBand: band)
        let width = 360 / Double(columns)
        let column = Self.index((lon + 180) / width, count: columns)
        let south = -90 + Double(band) * bandHeight
        let north = band == bandCount - 1 ? 90 : -90 + Double(band + 1) * bandHeight
        let west = -180 + Double(column) * width
        let east = column == columns - 1 ? 180 : -180 + Double(column + 1) * width
        return Cell(band: band, column: column, columns: columns,
                    south: south, north: north, west: west, east: east)
    }

    /// Metres from the cell's centre to its farthest corner: the radius of a circle
    /// around the centre that holds the whole cell.
    func halfDiagonal(of cell: Cell) -> Double {
        let lat = cell.centreLatitude, lon = cell.centreLongitude
        let toSouth = GeoMath.haversine(lat1: lat, lon1: lon, lat2: cell.south, lon2: cell.east)
        let toNorth = GeoMath.haversine(lat1: lat, lon1: lon, lat2: cell.north, lon2: cell.east)
        return max(toSouth, toNorth)
    }

    /// `fix` with reduced accuracy: latitude and longitude become the centre of the
    /// fix's cell; `horizontalAccuracy` is at least the cell's half-diagonal;
    /// altitudes, vertical accuracy, speed, course and their accuracies are
    /// removed. `timestamp` and `mode` are kept.
    public func reduce(_ fix: Fix) -> Fix {
        let c = cell(latitude: fix.latitude, longitude: fix.longitude)
        let radius = halfDiagonal(of: c)
        let reported = fix.horizontalAccuracy ?? 0
        return Fix(latitude: c.centreLatitude, longitude: c.centreLongitude, mode: fix.mode,
                   horizontalAccuracy: max(reported.isFinite ? reported : 0, radius),
                   timestamp: fix.timestamp, source: fix.source)
    }
}
