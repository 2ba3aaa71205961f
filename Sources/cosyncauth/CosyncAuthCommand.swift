import ArgumentParser
@main struct CosyncAuthCommand: AsyncParsableCommand { func run() async throws {} }
