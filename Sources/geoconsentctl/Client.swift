import GeoDBus
import GeoCore
import GeoConsentAPI

/// A failure the command explains: exit status 1.
struct Failure: Error {
    var message: String
    init(_ m: String) { message = m }
}

/// A connection with blocking calls, for the terminal agent (which registers, then
/// serves Confirm/Cancel on its own loop); the other commands use GeoConsentClient.
final class Client {
    let connection: Connection

    init(bus: BusAddress) throws {
        do {
            connection = try Connection(bus: bus)
        } catch {
            throw Failure("cannot connect to the \(bus): \(error)")
        }
    }

    /// Calls a method of the client interface and returns its out-values.
    func call(_ member: String, _ args: [DBusValue] = [], interface: String = GeoConsentAPI.interfaceName,
              timeout: Double = 30) throws -> [DBusValue] {
        let m = try Message.methodCall(destination: GeoConsentAPI.busName, path: GeoConsentAPI.objectPath,
                                       interface: interface, member: member)
        try m.append(args)
        do {
            let reply = try connection.callBlocking(m, timeout: timeout)
            if let e = reply.asError { throw e }
            return reply.arguments()
        } catch let e as DBusError {
            throw Failure(Client.explain(e))
        }
    }

    static func explain(_ e: DBusError) -> String {
        switch e.name {
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
            return "geoconsentd is not running on this bus (\(e.message))"
        case GeoConsentAPI.ErrorName.noAgent:
            return "no consent agent is registered for your user: start one with 'geoconsentctl agent'"
        case GeoConsentAPI.ErrorName.notAuthorized:
            return "not authorized: \(e.message)"
        case GeoConsentAPI.ErrorName.gpsUnavailable:
            return "no GPS: \(e.message)"
        case GeoConsentAPI.ErrorName.timeout:
            return "no fix in time: \(e.message)"
        default:
            return "\(e.name): \(e.message)"
        }
    }
}
