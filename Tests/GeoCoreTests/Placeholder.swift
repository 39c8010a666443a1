import XCTest
final class GeoCoreTestsPlaceholder: XCTestCase { func testPlaceholder() { XCTAssertTrue(true) } }
