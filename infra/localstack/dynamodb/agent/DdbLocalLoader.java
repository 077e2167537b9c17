// Stand-in for LocalStack's ddb-local-loader agent, which LocalStack passes to DynamoDB Local
// with -javaagent and would otherwise download from GitHub. The original patches DynamoDB
// Local to allow more than 20 GSIs per table; this one does not, so that limit stays.
//
// What it does instead: DynamoDB Local has no option for the address it listens on, and
// ServerRunner.main binds every interface, while LocalStack only reaches it on localhost and
// nothing on this machine may listen beyond 127.0.0.1. So premain starts the server itself,
// bound to 127.0.0.1, and never returns: ServerRunner.main never runs. Reflection only, so this
// builds without DynamoDB Local. If any step fails it warns and returns, and DynamoDB Local
// starts as before, on every interface (tests/integration/test_localstack_loopback.py fails).
//
// Built by infra/localstack/ctl install (javac + a manifest with Premain-Class).
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;

public final class DdbLocalLoader {
    private static final String HOST = "127.0.0.1";
    private static final String SERVER_RUNNER = "com.amazonaws.services.dynamodbv2.local.main.ServerRunner";

    private DdbLocalLoader() {}

    public static void premain(String agentArgs, java.lang.instrument.Instrumentation inst) {
        Object proxyServer;
        try {
            proxyServer = bindToLoopback(mainArgs());
        } catch (Throwable e) { // Throwable: a missing class or method is a LinkageError
            System.err.println("ddb-local-loader: WARNING: cannot bind DynamoDB Local to " + HOST
                    + ", it will listen on every interface: " + cause(e));
            return;
        }
        try {
            proxyServer.getClass().getMethod("start").invoke(proxyServer);
            proxyServer.getClass().getMethod("join").invoke(proxyServer);
        } catch (Throwable e) {
            System.err.println("ddb-local-loader: DynamoDB Local failed: " + cause(e));
            cause(e).printStackTrace();
            System.exit(1);
        }
        // Stopped (or could not bind its port, which start() reports and swallows). Returning
        // would run ServerRunner.main, a second server on every interface: end as it would.
        System.exit(0);
    }

    /** What went wrong inside a reflective call, rather than the wrapper around it. */
    private static Throwable cause(Throwable e) {
        return e instanceof InvocationTargetException && e.getCause() != null ? e.getCause() : e;
    }

    /** DynamoDB Local's arguments: the launcher's command line ("<jar> <args>") without the jar. */
    private static String[] mainArgs() {
        String command = System.getProperty("sun.java.command", "");
        String jar = System.getProperty("java.class.path", "");
        // with -jar the class path is the jar as given, which may hold spaces; its arguments
        // (LocalStack's: -port N, -inMemory or -dbPath DIR, flags) are split on spaces
        String rest = !jar.isEmpty() && command.startsWith(jar + " ")
                ? command.substring(jar.length())
                : command.replaceFirst("^\\S*", "");
        rest = rest.strip();
        if (rest.isEmpty()) {
            throw new IllegalStateException("no arguments in sun.java.command: '" + command + "'");
        }
        return rest.split(" +");
    }

    /** ServerRunner's server for these arguments, not started, its connectors bound to HOST. */
    private static Object bindToLoopback(String[] args) throws Exception {
        Class<?> runner = Class.forName(SERVER_RUNNER, true, ClassLoader.getSystemClassLoader());
        Method create = runner.getMethod("createServerFromCommandLineArgs", String[].class);
        Object proxyServer = create.invoke(null, (Object) args);
        if (proxyServer == null) {
            throw new IllegalStateException("createServerFromCommandLineArgs returned null");
        }
        Field field = proxyServer.getClass().getDeclaredField("server");
        field.setAccessible(true);
        Object jetty = field.get(proxyServer);
        Object[] connectors = (Object[]) jetty.getClass().getMethod("getConnectors").invoke(jetty);
        if (connectors.length == 0) {
            throw new IllegalStateException("the server has no connectors");
        }
        for (Object connector : connectors) {
            connector.getClass().getMethod("setHost", String.class).invoke(connector, HOST);
        }
        return proxyServer;
    }
}
